"""``once demo``: a workload with every kind of trouble (``workload``), sent through the
local cloud (``drive``), and the stored state checked message by message (``verdict``)."""
