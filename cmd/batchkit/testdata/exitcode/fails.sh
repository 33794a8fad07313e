# Sourced by TestExitCodes: a script that fails (batchkit envsetup exits 1).
return 3
