"""Running a command line's `main` in the test process on bad input."""

import pytest


def error_lines(capsys, main, argv):
    """Runs `main(argv)`, which must exit with status 2 (bad input); returns the lines it wrote
    on stderr (leading and trailing blank lines left out)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()
