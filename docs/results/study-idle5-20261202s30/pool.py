#!/usr/bin/env python3
# pool.py OUT FILE...: concatenate hogab outputs, rounds renumbered (file k's round r -> 100*k + r)
import json, sys
with open(sys.argv[1], 'w') as o:
    for k, f in enumerate(sys.argv[2:]):
        for l in open(f):
            d = json.loads(l); d['round'] = 100 * k + d['round']; o.write(json.dumps(d) + '\n')
