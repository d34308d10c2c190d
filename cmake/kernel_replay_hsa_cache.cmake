# The project's HSA header cache (filled by scripts/hsa_headers.sh from
# Debian's newer suites), newest ROCm first: experimental (7.x), sid (6.4),
# trixie (6.1). Only directories that exist are listed.
include_guard(GLOBAL)

function(kernel_replay_hsa_cache_dirs out_var project_dir)
  set(dirs "")
  foreach(suite experimental sid trixie)
    set(dir "${project_dir}/.cache/hsa/${suite}/include")
    if(EXISTS "${dir}/hsa/hsa_api_trace.h")
      get_filename_component(dir "${dir}" ABSOLUTE)
      list(APPEND dirs "${dir}")
    endif()
  endforeach()
  set(${out_var} "${dirs}" PARENT_SCOPE)
endfunction()
