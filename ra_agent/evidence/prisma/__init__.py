"""PRISMA 2020: the check of a review's or draft's reporting (`check.py`), the PMC full texts it reads
(`fulltext.py`), the draft's checklist (`checklist.py`), a cluster's flow counts and diagram (`flow.py`) and where
the check's answer is kept (`store.py`)."""
