// Times and durations as Slurm users type them, for `tessera submit --time/--begin`, `tessera run`
// and `tessera history --since/--until`. Pure functions of the text and `now` (unix seconds); local
// calendar times go through the process's time zone (TZ), as sbatch's do. Thread-safe (localtime_r,
// mktime). Every error names `flag` and lists the accepted forms. Unit-tested in tests/cli.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "core/status.h"

namespace tessera::cli {

// A time limit (sbatch --time): "MM", "MM:SS", "HH:MM:SS", "D-HH", "D-HH:MM", "D-HH:MM:SS" (a bare
// number is minutes, as in Slurm), or a number with a unit "30s", "90m", "2h", "1d". "UNLIMITED" and
// "infinite" mean no limit (0). The answer is seconds; "0" is refused (Slurm's "0" means no limit:
// say UNLIMITED).
Result<int64_t> parse_time_limit(std::string_view text, const std::string& flag);

// A local calendar time "YYYY-MM-DD", "YYYY-MM-DDTHH:MM" or "YYYY-MM-DDTHH:MM:SS" (a space may
// replace the T) as unix seconds; nullopt when the text is not of these forms or not a real date.
std::optional<int64_t> parse_local_datetime(std::string_view text);

// A start time (sbatch --begin): a local date/time as above; "HH:MM[:SS]" (today, or tomorrow when
// that has passed); "now", "now+N" with a unit s/m/h/d/w or a word (seconds, minutes, hours, days,
// weeks; a bare N is seconds, as in Slurm); "today", "tomorrow" (midnight), "midnight", "noon",
// "teatime" (16:00) - the next one. Unix seconds.
Result<int64_t> parse_begin_time(std::string_view text, int64_t now, const std::string& flag);

// A point in the past (history --since/--until, as sacct's): a local date/time; "HH:MM[:SS]" (today,
// or yesterday when still to come); "now"; "now-N<unit>"; or a bare duration "1d", "12h", "30m"
// meaning that long ago. Unix seconds.
Result<int64_t> parse_past_time(std::string_view text, int64_t now, const std::string& flag);

// Seconds as sacct's Elapsed: "HH:MM:SS", or "D-HH:MM:SS" from a day ("00:00:05", "01:02:03",
// "2-03:00:00"); negative counts as 0.
std::string format_elapsed(int64_t seconds);

}  // namespace tessera::cli
