"""What `pip install` changed in a venv: two `pip freeze` outputs in, a JSON file of the packages
added, changed and removed out, and a summary on stdout (scripts/pythons.sh image, which
test_airflow_image.py reads the JSON of).

usage: package_changes.py OUT.json BEFORE.txt AFTER.txt
"""

import json
import re
import sys
from pathlib import Path


def pins(path):
    out = {}
    for line in Path(path).read_text().splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)(?:==| @ )(\S+)", line.strip())
        if m:  # name==version, or name @ file:///.../eos_ingest-0.1.0-py3-none-any.whl
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2).rsplit("/", 1)[-1].split("#")[0]
    return out


before, after = pins(sys.argv[2]), pins(sys.argv[3])
changes = {
    "added": {n: v for n, v in sorted(after.items()) if n not in before},
    "changed": {n: [before[n], v] for n, v in sorted(after.items()) if n in before and before[n] != v},
    "removed": {n: v for n, v in sorted(before.items()) if n not in after},
}
Path(sys.argv[1]).write_text(json.dumps(changes, indent=1))
print(
    f"pythons.sh: the install added {len(changes['added'])}, changed {len(changes['changed'])}, removed {len(changes['removed'])} of the image's {len(before)} packages"
)
for kind, items in changes.items():
    for name, version in items.items():
        print(f"  {kind}: {name} {' -> '.join(version) if isinstance(version, list) else version}")
