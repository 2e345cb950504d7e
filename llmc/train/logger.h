// logger.h — the JSONL run log: one JSON object per line.
//
// Invariant: the file only ever ends in a complete line. Each record goes to the kernel in one
// write(2) of the whole line; a short or failed write (a full disk, a file-size limit) is cut off
// again (ftruncate to the line's start) and stops the run with an error naming the file and the
// reason. A record that write() accepted survives a crash of the process; sync() (called at every
// checkpoint) makes the log survive a crash of the machine up to that point as well.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace train_gpt {

// One log record, fields kept in insertion order: {"type": ..., key: value, ...}.
class LogRecord {
  public:
    explicit LogRecord(std::string type) : type_(std::move(type)) {}
    LogRecord& num(const std::string& key, double value) {
        nums_.emplace_back(key, value);
        order_.push_back({kNum, nums_.size() - 1});
        return *this;
    }
    LogRecord& str(const std::string& key, const std::string& value) {
        strs_.emplace_back(key, value);
        order_.push_back({kStr, strs_.size() - 1});
        return *this;
    }
    LogRecord& boolean(const std::string& key, bool value) {
        bools_.emplace_back(key, value);
        order_.push_back({kBool, bools_.size() - 1});
        return *this;
    }
    std::string to_json() const;

  private:
    enum Kind { kNum, kStr, kBool };
    std::string type_;
    std::vector<std::pair<std::string, double>> nums_;
    std::vector<std::pair<std::string, std::string>> strs_;
    std::vector<std::pair<std::string, bool>> bools_;
    std::vector<std::pair<Kind, size_t>> order_;   // the fields in the order given: which list, where
};

class JsonlLog {
  public:
    // Starts a new file at `path`, replacing what was there (a link is never written through), or,
    // with append, continues a resumed run's log; fails naming the path.
    explicit JsonlLog(const std::string& path, bool append = false);
    ~JsonlLog();
    JsonlLog(const JsonlLog&) = delete;
    JsonlLog& operator=(const JsonlLog&) = delete;
    // Appends the record as one line; on failure the file keeps only its complete lines.
    void write(const LogRecord& record);
    // fsync: what is logged so far is on disk.
    void sync();
    const std::string& path() const { return path_; }

  private:
    std::string path_;
    int fd_ = -1;
    int64_t size_ = 0;   // bytes of complete lines in the file
};

}   // namespace train_gpt
