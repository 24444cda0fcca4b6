# shellcheck shell=bash
# lib.sh - helpers shared by tests/abi/check.sh and tests/abi/exports.sh (sourced, not run).

# indent: stdin indented by four spaces (details under a PASS/FAIL line).
indent() { sed 's/^/    /'; }

# header_text FILE: the header without comments and preprocessor lines.
header_text() {
  "${CC:-gcc}" -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null | grep -v '^[[:space:]]*#'
}

# header_functions FILE: sorted names of the functions FILE declares (nccl*/pnccl* followed by '(').
header_functions() {
  header_text "$1" | grep -oE '\bp?nccl[A-Za-z0-9_]*[[:space:]]*\(' | sed -E 's/[[:space:]]*\($//' | sort -u
}

# header_declarations FILE: each function declaration of FILE as one line ending in ';'.
header_declarations() {
  header_text "$1" | perl -0777 -ne '
    for my $s (split /[;{}]/) {
      next if $s =~ /=|\btypedef\b/;
      next unless $s =~ /\bp?nccl\w*\s*\(/;
      $s =~ s/\s+/ /g; $s =~ s/^ //;
      print "$s;\n";
    }'
}
