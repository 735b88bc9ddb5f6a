"""The errors a user can fix, each reported as one line (``pipeline.config.run_main``)."""


class PipelineError(Exception):
    """An input problem a user can fix; its message is one line and names what is at fault."""


class ConfigError(PipelineError):
    """A bad value in params.yaml or a bad command-line argument."""


class DataError(PipelineError):
    """A missing, corrupt or unreachable data file."""
