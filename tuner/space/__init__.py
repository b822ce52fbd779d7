"""The search space and how it is built: the space (``search_space``), its YAML files
(``space_file``), the ``auto`` space for one model (``autospace``), Dynamo settings as space
values (``dynamo_settings``) and graph-break repair (``repair``).
"""
