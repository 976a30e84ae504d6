"""Instance generators: instance files built from catalogs, the analytic cost model and
Cephalo's measured profiles. The committed instance files are their output."""
