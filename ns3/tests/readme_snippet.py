#!/usr/bin/env python3
"""The README's ns-3 scenario is the code of ns3/examples/ipkit-minimal.cc between
its '// README begin' and '// README end' lines, line for line (indentation
aside), so the README never shows code that does not build and run."""
import pathlib
import sys

root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else '.')
src = (root / 'ns3/examples/ipkit-minimal.cc').read_text().splitlines()
readme = (root / 'README.md').read_text().splitlines()

try:
    a = next(i for i, l in enumerate(src) if l.strip() == '// README begin')
    b = next(i for i, l in enumerate(src) if l.strip() == '// README end')
except StopIteration:
    sys.exit('ipkit-minimal.cc: README begin/end markers missing')
want = [l.strip() for l in src[a + 1:b]]
if not want:
    sys.exit('ipkit-minimal.cc: empty README block')

have = [l.strip() for l in readme]
for i in range(len(have) - len(want) + 1):
    if have[i:i + len(want)] == want:
        print(f'README.md lines {i + 1}..{i + len(want)} match ipkit-minimal.cc '
              f'({len(want)} lines)')
        sys.exit(0)
print('README.md does not contain the scenario of ns3/examples/ipkit-minimal.cc:')
print('\n'.join(want))
sys.exit(1)
