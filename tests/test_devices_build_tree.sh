#!/bin/sh
# `qport devices` straight from the build tree finds the plugins of that
# build without QPORT_BACKEND_PATH: libqport looks beside itself
# and the program, and in the build's vk/, cl/, cuda/ folders. Run from
# another folder, so that nothing depends on the working directory.
# args: QPORT BUILD_ROOT BACKEND... (the plugins this build made)
set -u
Q="$1"; B="$2"; shift 2
[ $# -gt 0 ] || { echo "skip: this build has no Vulkan or OpenCL plugin"; exit 77; }
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
cd "$T" || exit 1
env -u QPORT_BACKEND_PATH "$Q" devices --json > devices.json 2> devices.err || { cat devices.err; echo "FAIL: qport devices failed"; exit 1; }
env -u QPORT_BACKEND_PATH "$Q" devices | sed -n '1,/^$/p'
# a driver on the machine means a device is required, not only the plugin
vk_icd=$(ls /usr/share/vulkan/icd.d/lvp_icd*.json /etc/vulkan/icd.d/*.json 2>/dev/null | head -n 1)
cl_icd=$(ls /etc/OpenCL/vendors/*.icd 2>/dev/null | head -n 1)
python3 - "$B" "$vk_icd" "$cl_icd" "$@" <<'PY'
import json, os, sys
build, vk_icd, cl_icd, want = os.path.realpath(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4:]
d = json.load(open("devices.json"))
backends = {b["name"]: b for b in d["backends"]}
bad = 0
for name in want:
    b = backends.get(name)
    if not b or not b["loaded"]:
        print("FAIL: %s plugin not found without QPORT_BACKEND_PATH: %s" % (name, b and b["note"])); bad = 1; continue
    if not os.path.realpath(b["path"]).startswith(build + os.sep):
        print("FAIL: %s loaded from %s, not from the build tree %s" % (name, b["path"], build)); bad = 1
    need_dev = {"vulkan": vk_icd, "opencl": cl_icd}.get(name)
    if need_dev and b["devices"] < 1:
        print("FAIL: %s: no device although %s is installed: %s" % (name, need_dev, b["note"])); bad = 1
    print("%s: %s, %d device(s)" % (name, b["path"], b["devices"]))
sys.exit(bad)
PY
rc=$?
[ $rc -eq 0 ] && echo "ok: the build tree's plugins are found with no environment variable"
exit $rc
