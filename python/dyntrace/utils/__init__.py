"""dyntrace.utils: data loading (dyntrace.utils.data), as torch.utils."""
from dyntrace.utils import data
