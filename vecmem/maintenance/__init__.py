"""Maintenance: the forgetting policy and review queue (``hygiene.py``), the doctor, import and export, and
the supersession graph, as functions over records and the storage layer."""
