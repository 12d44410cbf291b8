"""Maintenance: the doctor (doctor.py), the forgetting policy and review queue (hygiene.py), import and export
(transfer.py) and store statistics (stats.py), as functions over records and the storage layer; the bank
(vecmem/bank/) calls them."""
