"""Per-lesson logic: widget builders, demos and exercise checks (one module per lesson, ``lNN_name.py``).

Notebooks stay short and every interactive callback can be driven by plain pytest.
"""
