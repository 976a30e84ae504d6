"""The Python API's faces (issue 44, items 5 and 9): what a user of ``import hetopt`` meets."""

from __future__ import annotations

import pytest

import hetopt
from hetopt.errors import InputError


@pytest.mark.parametrize("path", [123, None, 1.5, ["a.toml"]])
def test_load_of_something_not_a_path_is_an_input_error_of_one_line(path):
    with pytest.raises(InputError) as info:
        hetopt.load(path)
    text = str(info.value)
    assert text.startswith("path: ") and "\n" not in text and type(path).__name__ in text


@pytest.mark.parametrize("text", [123, None, b"problem = 'mixed'"])
def test_loads_of_something_not_text_is_an_input_error_of_one_line(text):
    with pytest.raises(InputError) as info:
        hetopt.loads(text)
    assert str(info.value).startswith("text: ") and "\n" not in str(info.value)
