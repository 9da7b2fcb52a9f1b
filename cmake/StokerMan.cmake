# Writes stoker(1) from the binary's own --help and each subcommand's, so the
# page cannot drift from the options (docs/configuration.md is checked against
# the same text by tests/integration/test_cli.py). help2man reads one program's
# --help only, not a subcommand's, hence this script.
#
# cmake -DSTOKER=path/to/stoker -DOUT=stoker.1 -DVERSION=x.y.z -P StokerMan.cmake

# roff: a backslash is \e, and a line starting with . or ' is escaped.
function(stoker_roff text out_var)
  string(REPLACE "\\" "\\e" text "${text}")
  string(REGEX REPLACE "(^|\n)([.'])" "\\1\\\\&\\2" text "${text}")
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

function(stoker_help out_var)
  execute_process(COMMAND "${STOKER}" ${ARGN} --help OUTPUT_VARIABLE text RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${STOKER} ${ARGN} --help exited ${rc}")
  endif()
  stoker_roff("${text}" text)
  set(${out_var} "${text}" PARENT_SCOPE)
endfunction()

stoker_help(top)
set(page ".TH STOKER 1 \"\" \"stoker ${VERSION}\" \"User Commands\"
.SH NAME
stoker \\- a read-only FUSE mount that keeps a slow origin's data in an SSD cache
.SH SYNOPSIS
.B stoker mount
ORIGIN MOUNTPOINT --cache DIR [OPTIONS]
.br
.B mount -t fuse.stoker
ORIGIN MOUNTPOINT -o cache=DIR[,OPTIONS]
.SH DESCRIPTION
.nf
${top}.fi
")
foreach(cmd mount unmount stat fsck warm)
  stoker_help(text ${cmd})
  string(APPEND page ".SH \"STOKER ${cmd}\"\n.nf\n${text}.fi\n")
endforeach()
string(APPEND page ".SH SEE ALSO
The documentation installed with stoker (docs/configuration.md lists every option with its default and what
survives a crash; docs/operations.md covers fstab, systemd, metrics, warm and fsck).
")
file(WRITE "${OUT}" "${page}")
