#!/usr/bin/env python3
"""Opcode histogram of kernels in `cuobjdump -sass` output (on the device machine, which has
cuobjdump): python3 sass_hist.py ALL.sass REGEX [OUTDIR]. For each function whose mangled name
matches REGEX: the total, the most used opcodes, and the same for its hottest loop (the span of
its last backward branch); with OUTDIR the function's SASS is written there too."""
import collections
import re
import sys


def parse(text):
    ins = []
    for line in text.split('\n'):
        m = re.search(r'/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z0-9_.]+)([^;]*);', line)
        if m:
            ins.append((int(m.group(1), 16), m.group(3), m.group(4).strip()))
    return ins


def hist(ins):
    c = collections.Counter()
    for _, op, _ in ins:
        c['IMAD.MOV' if op.startswith('IMAD.MOV') else op.split('.')[0]] += 1
    return len(ins), c.most_common(20)


def main():
    text = open(sys.argv[1]).read()
    out = sys.argv[3] if len(sys.argv) > 3 else None
    for i, f in enumerate(re.split(r'\n\s*Function : ', text)[1:]):
        name = f.split('\n')[0]
        if not re.search(sys.argv[2], name):
            continue
        ins = parse(f)
        print(name[:120])
        print('  all ', *hist(ins))
        back = [(a, int(args.split()[-1], 16)) for a, op, args in ins
                if op == 'BRA' and args.split()[-1].startswith('0x') and int(args.split()[-1], 16) < a]
        if back:
            hi, lo = max(back)
            print(f'  loop {lo:#x}..{hi:#x}', *hist([x for x in ins if lo <= x[0] <= hi]))
        if out:
            open(f'{out}/kernel{i}.sass', 'w').write(f)


if __name__ == '__main__':
    main()
