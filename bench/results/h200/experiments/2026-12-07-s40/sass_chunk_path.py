# Usage: python3 sass_chunk_path.py <object.o> <mangled-name fragment>; needs cuobjdump (PyPI nvidia-cuda-cuobjdump), path in CU.
# Dynamic instruction count of one full chunk of the K loop (lane-0 issue path included): walk from the loop head,
# taking conditional branches by rule: the partial-chunk test not taken, TRYWAIT retry not taken, BRA.U.ANY not taken,
# the issue-skip not taken, the 'partial bytes' issue branch not taken.
import sys,re,subprocess
CU='/tmp/s39/v/lib/python3.11/site-packages/nvidia/cu13/bin'
O=sys.argv[1]; pat=sys.argv[2]
txt=subprocess.run([CU+'/cuobjdump','-sass',O],capture_output=True,text=True).stdout
for f in re.split(r'\n\s*Function : ',txt)[1:]:
    if pat in f.split('\n')[0]:
        ins=[l.split('*/')[1].split(';')[0].strip() for l in f.split('\n') if re.match(r'\s*/\*[0-9a-f]{4}\*/',l)]
        # loop = first backward branch spanning > 300 instructions
        for i,s in enumerate(ins):
            m=re.search(r'BRA (0x[0-9a-f]+)',s)
            if m and 'U.ANY' not in s and int(m.group(1),16)//16 < i-300:
                head=int(m.group(1),16)//16; tail=i; break
        pc=head; n=0; seen=set(); trace=[]
        while pc<=tail:
            s=ins[pc]; n+=1; trace.append((pc,s))
            m=re.search(r'BRA (0x[0-9a-f]+)',s)
            if pc==tail: break
            if m:
                tgt=int(m.group(1),16)//16
                cond=s.startswith('@')
                if not cond: pc=tgt; continue
                # decisions
                if 'U.ANY' in s or tgt>tail or tgt<pc: pc+=1; continue
                take=sys.argv[3:] and hex(pc*16) in sys.argv[3:]
                pc = tgt if take else pc+1
                continue
            pc+=1
        print(O, 'loop', hex(head*16), hex(tail*16), 'path', n)
        for a,s in trace:
            if 'BRA' in s: print('  ',hex(a*16),s)
        break
