"""The systematic-review search of a cluster (`search.py`: find_existing_sr, PubMed or the local corpus), its
overlap with the cluster's trials and where that answer is kept (`overlap.py`), and the alternative PICO a covering
review leaves open (`alternative.py`)."""
