import json,sys
for f in sys.argv[1:]:
    out=[]
    for line in open(f):
        d=json.loads(line)
        if d.get('study')=='weft-phased-summary' and d['config']=='adaptive':
            out.append(f"{d['phase']} {round(d['vs_oracle'],2) if d.get('vs_oracle') else round(d['median'],2)}")
    print(f.split('/')[-1], ' | '.join(out))
