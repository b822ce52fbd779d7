"""One run of one workload: its options (``options``), how it is prepared (``pipeline``), the
Run object whose methods are its phases (``phases``), and its clock and budget (``budget``).
"""
