"""The split rule of torch-harmonics 0.8 (``torch_harmonics.distributed.compute_split_shapes``), which ACE
uses, stated from its definition for the tests: every part ceil(n/parts), the last the rest; when that
would leave the last part empty or negative, every part floor(n/parts) and the last the rest."""


def compute_split_shapes(n, parts):
    if parts == 1:
        return [n]
    size = -(-n // parts)
    last = n - size * (parts - 1)
    if last <= 0:
        size = n // parts
        last = n - size * (parts - 1)
    return [size] * (parts - 1) + [last]
