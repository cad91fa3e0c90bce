"""The reports of a cluster: the evidence-gap dossier (`gap_dossier.py`), ra's own SR draft (`sr_draft.py`) and what
both read and write (`common.py`: the cluster's evidence, citations, tables)."""
