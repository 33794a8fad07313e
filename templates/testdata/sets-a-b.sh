# Sourced by env_test.go's batch scripts: sets the variables the profile
# sets too (the profile's value must win unless the user exported one),
# one the profile does not set (it must pass through), and reads an unset
# variable and runs a failing command, as vendor scripts do, which neither
# nounset nor errexit may turn into a failure.
export A=script B=script E=script S=script
: "$BATCHKIT_TEST_NEVER_SET"
false
return 0
