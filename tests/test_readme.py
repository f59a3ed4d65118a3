"""The README stays true: its configuration table is the settings' own documentation."""
from memstream.app.readme import README, with_config_table


def test_readme_config_table_is_current():
    text = README.read_text()
    assert with_config_table(text) == text, "run `memstream config --update-readme`"


def test_ci_runs_the_readmes_test_command():
    ci = (README.parent / ".ci" / "run").read_text().strip().splitlines()[-1]
    assert ci.strip() in README.read_text()
