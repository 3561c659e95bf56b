# Sourced by the scripts that run on the GPU machine: the run folder $R, the packed binaries of
# .device/ (scripts/device-pack.sh) unpacked into /tmp/b with their libraries on the path, and the
# test fixtures.
R=/tmp/run
mkdir -p $R /tmp/b
export LD_LIBRARY_PATH=$PWD/.device/lib:$LD_LIBRARY_PATH
export SONGLOOM_FIXTURES=$PWD/tests/fixtures
for b in .device/*.xz; do n=$(basename $b .xz); xz -dc $b > /tmp/b/$n; chmod +x /tmp/b/$n; done
