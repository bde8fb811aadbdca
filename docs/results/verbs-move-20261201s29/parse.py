# parse.py FILE TAG : one line per write-bw --stats run (client stats first, then "server, after")
import re,sys
t=open(sys.argv[1]).read()
bw=re.search(r'^\s*65536\s+\d+\s+([\d.]+)',t,re.M)
parts=t.split('server, after')
def g(s,k):
    m=re.search(r'\b'+k+r': (\d+)',s); return int(m.group(1)) if m else -1
c,s=parts[0],parts[1] if len(parts)>1 else ''
print(f"{sys.argv[2]:>8} MB/s {float(bw.group(1)) if bw else -1:8.0f}  srv sleeps {g(s,'sleeps'):5} passes {g(s,'passes'):7} moved {g(s,'wakes_moved'):3} | cli passes {g(c,'passes'):8} sleeps {g(c,'sleeps'):4} moved {g(c,'wakes_moved'):3}",flush=True)
