"""Defer a package's ``__init__`` until something reads a name it defines.

lancedb imports ``lance_namespace``, which imports the models of its generated
REST client, ``lance_namespace_urllib3_client``. That package's ``__init__``
also imports every API class of the client (each method wrapped by pydantic's
``validate_call``): 12 MB resident in every process, for a client a local or
object-storage index never calls. :func:`defer_package_init` registers the
package with its ``__init__`` not yet run: its submodules (``.models``) import
as usual, and the first read of a name only ``__init__`` defines (``ApiClient``,
``TableApi``, …) runs it then (PEP 562 module ``__getattr__``), so code that
needs the client still gets all of it.

``importlib.util.LazyLoader`` does not fit: it runs ``__init__`` on the first
attribute read of any kind, and importing a submodule reads ``__path__``.
"""

from __future__ import annotations

import importlib.util
import sys
import threading


def defer_package_init(name: str) -> bool:
    """Register package ``name`` with its ``__init__`` deferred; True if it was.

    Nothing happens (False) when the package is already imported, is not
    installed, or is a plain module. Thread-safe: ``__init__`` runs once.
    """
    if name in sys.modules:
        return False
    try:
        spec = importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return False
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        return False
    module = importlib.util.module_from_spec(spec)  # __path__, __spec__ set; __init__ not run
    lock = threading.RLock()  # re-entered when __init__ itself reads a name of the package
    ran = False

    def __getattr__(attr: str):
        nonlocal ran
        if attr.startswith("__") and attr.endswith("__"):
            raise AttributeError(attr)  # introspection (copy, pickle, doctest) must not run __init__
        with lock:
            if not ran:
                ran = True
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    ran = False  # as a failed import: the next read runs __init__ again
                    raise
        try:
            return module.__dict__[attr]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attr!r}") from None

    module.__getattr__ = __getattr__
    sys.modules[name] = module
    return True
