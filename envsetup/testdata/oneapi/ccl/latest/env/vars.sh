# A stand-in for oneCCL's env/vars.sh, after its documented behaviour:
# CCL_ROOT from its own location, lib prepended to LD_LIBRARY_PATH and
# LIBRARY_PATH, include to CPATH, and --ccl-configuration=cpu or
# cpu_gpu_dpcpp (the default) choosing the library directory. Called by
# setvars.sh (SETVARS_CALL=1) it takes setvars.sh's arguments too and
# ignores the ones it does not know.
ccl_root=$(cd "$(dirname -- "${BASH_SOURCE[0]}")/.." && pwd -P)
ccl_configuration=cpu_gpu_dpcpp
for ccl_arg in "$@"; do
  case "$ccl_arg" in
    --ccl-configuration=*) ccl_configuration=${ccl_arg#*=} ;;
  esac
done
case "$ccl_configuration" in
  cpu | cpu_gpu_dpcpp) ;;
  *)
    echo "ERROR: unknown --ccl-configuration=$ccl_configuration: want cpu or cpu_gpu_dpcpp" >&2
    return 1
    ;;
esac
export CCL_ROOT=$ccl_root
export CCL_CONFIGURATION=$ccl_configuration
export CPATH="$ccl_root/include${CPATH:+:$CPATH}"
export LIBRARY_PATH="$ccl_root/lib/$ccl_configuration${LIBRARY_PATH:+:$LIBRARY_PATH}"
export LD_LIBRARY_PATH="$ccl_root/lib/$ccl_configuration${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
