"""``import kstream_nb`` changes nothing global; ``%load_ext kstream_nb`` registers the formatters and magics."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import kstream_nb as ks

PROBE = textwrap.dedent(
    """
    import json, sys
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()  # a live IPython shell before the import, as in a notebook
    html = shell.display_formatter.formatters["text/html"]
    import kstream_nb
    from kstream_nb.topology.description import TopologyDescription

    watched = (kstream_nb.Topology, TopologyDescription, kstream_nb.KafkaStreams)
    after_import = {
        "formatters": [t.__name__ for t in watched if t in html.type_printers],
        "magics": "kstream" in shell.magics_manager.magics["cell"],
        "jupyter_imported": "kstream_nb.jupyter" in sys.modules,
        "ipywidgets_imported": "ipywidgets" in sys.modules,
        "names": dir(kstream_nb),
    }
    shell.run_line_magic("load_ext", "kstream_nb")
    after_load_ext = {
        "formatters": [t.__name__ for t in watched if t in html.type_printers],
        "magics": "kstream" in shell.magics_manager.magics["cell"],
    }
    print(json.dumps({"import": after_import, "load_ext": after_load_ext}))
    """
)


def _probe() -> dict[str, dict[str, object]]:
    done = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=90, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_import_registers_nothing_and_load_ext_registers_formatters_and_magics() -> None:
    seen = _probe()
    assert seen["import"]["formatters"] == []
    assert seen["import"]["magics"] is False
    assert seen["import"]["jupyter_imported"] is False
    assert seen["import"]["ipywidgets_imported"] is False
    names = seen["import"]["names"]
    assert isinstance(names, list)
    assert not {"sys", "Any", "dashboard"} & set(names)
    assert seen["load_ext"]["formatters"] == ["Topology", "TopologyDescription", "KafkaStreams"]
    assert seen["load_ext"]["magics"] is True


def test_all_is_explicit_and_complete() -> None:
    assert len(ks.__all__) == len(set(ks.__all__))
    assert all(hasattr(ks, name) for name in ks.__all__)
    public = {n for n in vars(ks) if not n.startswith("_")}
    submodules = {n for n in public if type(getattr(ks, n)).__name__ == "module"}
    assert public - submodules - set(ks.__all__) == {"load_ipython_extension"}


def test_dashboard_is_a_method_of_the_class() -> None:
    assert "dashboard" in vars(ks.KafkaStreams)  # defined in the class, not patched on by the package
