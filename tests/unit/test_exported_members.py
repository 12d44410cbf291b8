import types

import vecmem


def test_all_names_exist_and_are_unique():
    assert len(vecmem.__all__) == len(set(vecmem.__all__))
    for name in vecmem.__all__:
        assert hasattr(vecmem, name), name


def test_every_public_attribute_is_listed():
    public = {
        name for name, value in vars(vecmem).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)  # submodules are not names
    }
    assert public == set(vecmem.__all__) - {"__version__"}


def test_errors_form_one_tree():
    for name in vecmem.errors.__all__:
        obj = getattr(vecmem.errors, name)
        if isinstance(obj, type):
            assert issubclass(obj, vecmem.VecmemError)
    assert issubclass(vecmem.EmbeddingMismatchError, vecmem.StoreError)
