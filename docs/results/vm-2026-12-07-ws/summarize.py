import json,sys,statistics as st
rows={}
for line in open(sys.argv[1]):
    r=json.loads(line); l=r['load']
    if l.get('failed'): rows.setdefault((r['row'],r['server']),[]).append(None); continue
    prob=sum(l.get(k,0) for k in ('errors','mismatches','lost','duplicates','reordered','short_counts'))
    if r['row'] in('fanout1','fanout'): v=(l.get('server_cpu_us_per_delivery'), l.get('last_max_us',0)/1000, l.get('lat_p99_us',0)/1000)
    elif r['row']=='storm': v=(l.get('storm_s'), l.get('live_during_p99_us',0)/1000, l.get('live_before_p99_us',0)/1000)
    elif r['row']=='echo': v=(l.get('server_cpu_us_per_msg') or l.get('server_cpu_us_per_message'), l.get('msgs_per_s') or l.get('messages_per_s'))
    else: v=(l.get('server_rss_per_conn_bytes'),)
    rows.setdefault((r['row'],r['server']),[]).append((v,prob))
for k,vs in sorted(rows.items()):
    good=[v for v in vs if v]
    cols=list(zip(*[v[0] for v in good]))
    print(k, 'n=%d'%len(good), 'problems=%d'%sum(v[1] for v in good), ' | '.join('med %.2f (%.2f-%.2f)'%(st.median(c),min(c),max(c)) if None not in c else str(c) for c in cols))
