"""The search: each micro-batch size's enumeration (enumerate, on the workers: workers), its
composition into the fastest pipeline (compose, sizes), the 1F1B schedule (schedule), a
``--target``'s launchable plan (launchable), and the plan's status, bound and gap (outcome).
"""
