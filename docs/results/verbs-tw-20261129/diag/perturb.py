import time,sys
end=time.time()+float(sys.argv[1])
while time.time()<end:
    t=time.perf_counter()
    while time.perf_counter()-t<0.0003: pass
    time.sleep(0.0007)
