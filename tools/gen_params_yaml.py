"""Write config/surprise_memory.yaml from the settings declared in surprise_memory/config/.

Run after adding or changing a setting: `python tools/gen_params_yaml.py`. The YAML lists
every node parameter with its default and its description as a comment; a test checks that
the committed file matches the declarations.
"""

from __future__ import annotations

import json
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from surprise_memory.config import SPLIT_NODE_CONFIGS, settings_of  # noqa: E402

HEADER = """\
# Parameters of the surprise_memory nodes, with the paper's defaults (M=64, W=64, gamma=1.0,
# 8 frames per episode). Generated from surprise_memory/config/ by tools/gen_params_yaml.py:
# each setting has one name, one default and one description there, shown here as a comment
# and by `ros2 param describe /surprise_memory/<node> <name>`. Copy this file, change what
# you need, and pass it with `params_file:=`. With `pipeline:=one_process` the launch file
# gives pipeline_node these three sections merged; a /**/pipeline_node section (optional)
# overrides them, and is what `ros2 run surprise_memory pipeline_node` reads.
"""


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, float):
        text = repr(v)
        mantissa, _, exponent = text.partition("e")
        if "." not in mantissa:  # YAML reads 1e-06 as a string; 1.0e-06 is a float
            mantissa += ".0"
        return mantissa + ("e" + exponent if exponent else "")
    return repr(v)


def render() -> str:
    """The YAML text."""
    lines = [HEADER]
    for node, classes in SPLIT_NODE_CONFIGS.items():
        lines.append(f"/**/{node}:")
        lines.append("  ros__parameters:")
        for cls in classes:
            lines.append(f"    # --- {cls.__name__} ---")
            for spec in settings_of(cls):
                note = spec.description + (" (read-only)" if spec.read_only else "")
                for chunk in textwrap.wrap(note, 88):
                    lines.append(f"    # {chunk}")
                lines.append(f"    {spec.name}: {_value(spec.default)}")
        lines.append("")
    return "\n".join(lines)


if __name__ == "__main__":
    (ROOT / "config" / "surprise_memory.yaml").write_text(render())
