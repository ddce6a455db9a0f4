"""The files the checkpoint tool and the tools exchange: one module each, their only reader and
writer (`predictions`, `per_image`, `scores`, `eval_metrics`), plus `json_object` and
`csv_table`, readers naming the file and line of a malformed input. Readers are strict;
writers check everything first and write whole or not at all (tests/formats/test_owners.py).
"""
