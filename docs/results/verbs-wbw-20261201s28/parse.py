import re,sys
t=open(sys.argv[1]).read()
bw=re.search(r'^\s*65536\s+\d+\s+([\d.]+)',t,re.M)
parts=t.split('server, after')
def g(s,k):
    m=re.search(r'\b'+k+r': (\d+)',s); return int(m.group(1)) if m else -1
c,s=parts[0],parts[1] if len(parts)>1 else ''
print(f"{sys.argv[2]:>6} MB/s {float(bw.group(1)) if bw else -1:8.0f}  srv sleeps {g(s,'sleeps'):5} passes {g(s,'passes'):7} acks {g(s,'acks_sent'):5} standbys {g(s,'standbys')} | cli passes {g(c,'passes'):8} sleeps {g(c,'sleeps')} takeovers {g(c,'takeovers')} waits {g(c,'waits')} blocked {g(c,'blocked')}")
