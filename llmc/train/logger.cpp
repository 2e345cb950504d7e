// logger.cpp — see logger.h.
#include "train/logger.h"

#include "utils.h"

#include <nlohmann/json.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace train_gpt {

std::string LogRecord::to_json() const {
    nlohmann::ordered_json j;
    j["type"] = type_;
    for (auto [kind, i] : order_) {
        if (kind == kBool) {
            j[bools_[i].first] = bools_[i].second;
        } else if (kind == kNum) {
            double v = nums_[i].second;
            // JSON has no inf/NaN: log them as strings so a diverging run stays parseable
            if (!std::isfinite(v)) {
                j[nums_[i].first] = format("%g", v);
            } else if (v == std::trunc(v) && std::fabs(v) < 9007199254740992.0) {
                j[nums_[i].first] = (int64_t)v;   // whole numbers (steps, counts) as JSON integers
            } else {
                j[nums_[i].first] = v;
            }
        } else {
            j[strs_[i].first] = strs_[i].second;
        }
    }
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

namespace {

// The log is a file of the run's own. Whatever stands at `path` for a fresh log is replaced, not
// truncated: a link there (a `cp -rs` or `cp -al` copy of another run's directory) would carry the
// truncation and the new records into that run's log. A continued log is the file a resume has
// just rewritten (truncate_log_for_resume replaces it too); a link there now is a dangling one,
// replaced as well.
int open_own_log(const std::string& path, bool append) {
    struct stat st;
    const bool exists = ::lstat(path.c_str(), &st) == 0;
    if (exists && (!append || S_ISLNK(st.st_mode)) && ::unlink(path.c_str()) != 0) {
        fail("%s: cannot replace the log: %s", path.c_str(), std::strerror(errno));
    }
    return open_regular_file(path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | (append ? 0 : O_EXCL));
}

}   // namespace

JsonlLog::JsonlLog(const std::string& path, bool append) : path_(path), fd_(open_own_log(path, append)) {
    struct stat st;
    if (::fstat(fd_, &st) != 0) {
        const int err = errno;
        ::close(fd_);
        fail("%s: cannot stat the log: %s", path.c_str(), std::strerror(err));
    }
    size_ = st.st_size;
}

JsonlLog::~JsonlLog() {
    if (fd_ >= 0) ::close(fd_);
}

void JsonlLog::write(const LogRecord& record) {
    const std::string line = record.to_json() + "\n";
    size_t done = 0;
    while (done < line.size()) {   // one write(2) of the line; more only after a short write
        const ssize_t n = ::write(fd_, line.data() + done, line.size() - done);
        if (n > 0) {
            done += (size_t)n;
        } else if (n == 0 || errno != EINTR) {
            // a full disk, a file-size limit, an I/O error: cut the torn line off and stop
            const int err = n < 0 ? errno : EIO;
            const bool cut = done == 0 || ::ftruncate(fd_, size_) == 0;
            fail(
                "%s: cannot append a record: %s (%s)", path_.c_str(), std::strerror(err),
                cut ? "the log ends at its last complete record" : "a torn last line is left: it could not be cut off");
        }
    }
    size_ += (int64_t)line.size();
}

void JsonlLog::sync() {
    if (::fsync(fd_) != 0) fail("%s: fsync failed: %s", path_.c_str(), std::strerror(errno));
}

}   // namespace train_gpt
