"""Every option the ``eventhubs`` data source reads is on the options reference page.

The page (``docs/reference/spark-options.md``) is written by hand; the options are read one by one in
``airflow_provider_eh/spark/datasource/`` through the options reader's ``text``, ``number``, ``flag``,
``columns`` and ``required``. The test reads those calls' first argument from the code, so an option
added without its row fails here.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO

PAGE = REPO / "docs" / "reference" / "spark-options.md"
READERS = {"text", "number", "flag", "columns", "required"}


def options_read_in(folder: Path) -> set[str]:
    names = set()
    for module in folder.glob("*.py"):
        for node in ast.walk(ast.parse(module.read_text())):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in READERS
                    and isinstance(node.func.value, ast.Name) and node.func.value.id == "opts"
                    and node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
                names.add(node.args[0].value)
    return names


def test_every_option_the_data_source_reads_is_on_the_reference_page() -> None:
    options = options_read_in(REPO / "airflow_provider_eh" / "spark" / "datasource")
    assert {"connectionString", "producerGroup", "startingPosition", "maxEventsPerTrigger"} <= options  # the scan works
    page = PAGE.read_text()
    # an alias of the Scala connector's is named with its prefix in the table of names moved from it
    assert sorted(name for name in options if f"`{name}`" not in page and f"`eventhubs.{name}`" not in page) == []
