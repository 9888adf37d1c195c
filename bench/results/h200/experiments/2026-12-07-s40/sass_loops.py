# Usage: python3 sass_loops.py <object.o> [mangled-name fragment]: each long loop's instruction mix; cuobjdump path in CU.
import re,collections,sys,subprocess
CU='/tmp/s39/v/lib/python3.11/site-packages/nvidia/cu13/bin'
O=sys.argv[1]; pat=sys.argv[2] if len(sys.argv)>2 else 'ILb1ELi1ELi1ELi4ELi2ELi2ELi1ELi4ELi2E'
txt=subprocess.run([CU+'/cuobjdump','-sass',O],capture_output=True,text=True).stdout
for f in re.split(r'\n\s*Function : ',txt)[1:]:
    name=f.split('\n')[0].strip()
    if pat not in name: continue
    ins=[l.split('*/')[1].split(';')[0].strip() for l in f.split('\n') if re.match(r'\s*/\*[0-9a-f]{4}\*/',l)]
    print(name[-60:], 'total', len(ins))
    # find loops: backward branches
    for i,s in enumerate(ins):
        m=re.search(r'BRA (0x[0-9a-f]+)',s)
        if m and 'U.ANY' not in s:
            tgt=int(m.group(1),16)//16
            if tgt<i and i-tgt>150:
                c=collections.Counter(x.split()[1 if x.startswith('@') else 0].split('.')[0] for x in ins[tgt:i+1])
                print('  loop',hex(tgt*16),hex(i*16),i-tgt+1,dict(c.most_common(14)))
