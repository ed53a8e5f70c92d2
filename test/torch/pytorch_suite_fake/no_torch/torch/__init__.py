"""A stand-in for torch in pytorch_suite_selftest.py, enough for the runner's check of the cuvmm
mode: no CUDA device."""
__version__ = "stand-in"


class cuda:  # noqa: N801 - the name torch.cuda
    @staticmethod
    def is_available():
        return False
