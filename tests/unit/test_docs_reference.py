"""docs/configuration.md and docs/cli.md say what the code accepts.

Their reference parts are generated (gitops_ray/cli/reference.py) from the settings
table, the chart's own keys and the click commands; these tests fail when a committed
page is stale (run ``python -m gitops_ray.cli.reference docs``), and check the facts the
pages rest on from the other side: every setting and every option is on its page, and a
boolean setting is a flag of ``run`` that takes no value.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest

from gitops_ray.cli import main
from gitops_ray.cli.reference import BEGIN, END, main_, replace_block, stale
from gitops_ray.schema import CHART_OWNED, chart_owner
from gitops_ray.settings import LIST_ITEMS, OPTIONS

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _generated(page: str) -> str:
    text = (DOCS / page).read_text()
    return text[text.index(BEGIN):text.index(END)]


def test_committed_pages_are_the_generated_ones() -> None:
    assert stale(DOCS) == [], "run: python -m gitops_ray.cli.reference docs"
    assert main_([str(DOCS), "--check"]) == 0


def test_every_setting_has_its_row_with_variable_flag_and_chart_value() -> None:
    table = _generated("configuration.md")
    for option in OPTIONS:
        row = next(line for line in table.splitlines() if line.startswith(f"| `{option.key}` |"))
        assert f"`{option.env}`" in row
        if option.flag_name:
            assert f"`{option.flag_name}`" in row
        assert ("set by the chart" in row) == (chart_owner(option.key) is not None)
        assert chart_owner(option.key) is not None or f"`config.{option.key}`" in row
    for key in LIST_ITEMS:
        assert f"| `{key}` |" in table


def test_every_chart_owned_key_names_a_setting() -> None:
    keys = [o.key for o in OPTIONS] + list(LIST_ITEMS)
    for owned in CHART_OWNED:
        assert any(k == owned or k.startswith(owned + ".") for k in keys), owned


def test_every_command_and_option_is_on_the_cli_page() -> None:
    page = _generated("cli.md")
    for name, command in main.commands.items():
        assert f"### `gitops-ray {name}`" in page
        if name == "run":
            continue  # its flags are the settings, on configuration.md
        for param in command.params:
            if isinstance(param, click.Option):
                assert f"`{param.opts[-1]}" in page or f", {param.opts[-1]}" in page, \
                    (name, param.opts)


@pytest.mark.parametrize("option", [o for o in OPTIONS if o.default in (True, False)
                                    and o.flag_name], ids=lambda o: o.key)
def test_boolean_settings_are_flags_without_a_value(option: object) -> None:
    """``run --argocd`` alone turns it on (it once needed ``--argocd true``)."""
    from gitops_ray.settings import Option

    assert isinstance(option, Option) and option.flag_name
    on, off = option.flag_name.split("/")
    run = main.commands["run"]
    dest = "opt_" + option.key.replace(".", "__")
    assert run.make_context("run", [on]).params[dest] is True
    assert run.make_context("run", [off]).params[dest] is False


def test_delete_help_says_cascading_is_the_default() -> None:
    help_text = main.commands["delete"].help or ""
    assert "unless --no-cascade" in help_text and "with --cascade" not in help_text


def test_replace_block_keeps_the_prose_around_it() -> None:
    text = f"before\n{BEGIN}\nold\n{END}\nafter\n"
    assert replace_block(text, "new") == f"before\n{BEGIN}\n\nnew\n\n{END}\nafter\n"
    with pytest.raises(ValueError):
        replace_block("no markers", "new")


def test_troubleshooting_names_every_failure_reason_and_condition() -> None:
    """docs/operations.md's tables have a row per Reason and per condition gitops-ray sets."""
    from gitops_ray.sync.reasons import Reason
    from gitops_ray.types import ConditionType

    text = (DOCS / "operations.md").read_text()
    section = text[text.index("## Troubleshooting"):]
    for reason in Reason:
        assert f"| `{reason.value}` |" in section, reason
    never = {ConditionType.ORPHANED_RESOURCE,
             ConditionType.REPEATED_RESOURCE}  # Argo CD's, never set here (the page says so)
    for condition in set(ConditionType) - never:
        assert f"| `{condition.value}` |" in section, condition
