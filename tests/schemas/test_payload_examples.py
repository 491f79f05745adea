"""Every example a job type's payload schema offers (the dashboard's forms start from them) is a valid payload."""

import pytest

from app.schemas.payloads.registry import BUILT_IN


@pytest.mark.parametrize("name", sorted(BUILT_IN))
def test_each_example_of_a_built_in_type_is_a_payload_its_model_accepts(name: str) -> None:
    spec = BUILT_IN[name]
    examples = spec.model.model_json_schema().get("examples", [])
    for example in examples:
        spec.model.model_validate(example)
    if spec.model.model_json_schema().get("required"):
        assert examples, f"{name} needs fields, so its schema offers an example of them"
