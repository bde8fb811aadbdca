import json,sys
for f in sys.argv[1:]:
  for l in open(f):
    d=json.loads(l); r=d['res'] or {}
    print(d['round'],d['bin'],d['N'],d['depth'],d['load'],d['t'],round(r.get('mmsg_per_s',0),3), round(1000*(r.get('cpu_client_us_per_op',0)+r.get('cpu_server_us_per_op',0))), r.get('client_bytes_per_qp'), r.get('server_bytes_per_qp'))
