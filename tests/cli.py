"""Running a command line's `main` in the test process on bad input."""

import pytest

import errors


def error_lines(capsys, main, argv):
    """Runs `main(argv)`, which must exit with status 2 (bad input); returns the lines it wrote
    on stderr (leading and trailing blank lines left out)."""
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    return capsys.readouterr().err.strip().splitlines()


def error_line(capsys, main, argv):
    """Runs `main(argv)` as its command line does (errors.run_main), expecting bad input: exit
    status 2 and one `error: ` line on stderr, which it returns."""
    with pytest.raises(SystemExit) as exit_info:
        errors.run_main(main, argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    return err
