"""The seed alone decides the examples rollcheck's properties draw.

Hypothesis collects the literals of the local modules loaded so far and draws them now and then
(a "constant pool"): without pinning, importing one more module of the user's changes the examples
of a seeded run. rollcheck's profiles pin the pool empty.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

_RUN = r'''
import json, sys
sys.path.insert(0, sys.argv[1])
if sys.argv[2] == "extra":
    import rollcheck_extra_constants  # noqa: F401  (a local module full of distinctive literals)
from hypothesis import given, seed, settings, strategies as st
from rollcheck.properties.profiles import profile_settings

seen = []

@seed(20261207)
@settings(profile_settings("ci"), max_examples=300, derandomize=False)
@given(st.integers(), st.text(max_size=8), st.floats(allow_nan=False))
def prop(i, s, f):
    seen.append([i, s, f])

prop()
print(json.dumps(seen))
'''

_EXTRA = "\n".join(f"C{k} = {987654 + 7919 * k}\nS{k} = 'rollcheck-distinctive-{k}'\nF{k} = {k}.7151"
                   for k in range(200)) + "\n"


def _examples(folder: Path, extra: bool) -> list[list[object]]:
    r = subprocess.run([sys.executable, "-P", "-c", _RUN, str(folder), "extra" if extra else "plain"],
                       capture_output=True, text=True, timeout=300, cwd=folder)
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout)


def test_the_same_seed_gives_the_same_examples_whatever_was_imported(tmp_path: Path) -> None:
    mod = tmp_path / "rollcheck_extra_constants.py"  # not under a tests folder: Hypothesis reads it
    mod.write_text(_EXTRA, encoding="utf-8")
    plain = _examples(tmp_path, extra=False)
    extra = _examples(tmp_path, extra=True)
    assert len(plain) == 300
    drawn = {x for ex in extra for x in ex if isinstance(x, str) and x.startswith("rollcheck-distinctive-")}
    assert not drawn, f"constants of an imported module were drawn: {sorted(drawn)[:5]}"
    assert plain == extra
