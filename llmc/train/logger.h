// logger.h — the JSONL run log: one JSON object per line, flushed as it is written, so a crash
// loses nothing already logged and plot tools can tail it.
#pragma once

#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace train_gpt {

// One log record, fields kept in insertion order: {"type": ..., key: value, ...}.
class LogRecord {
public:
    explicit LogRecord(std::string type) : type_(std::move(type)) {}
    LogRecord& num(const std::string& key, double value) { nums_.emplace_back(key, value); order_.push_back({true, nums_.size() - 1}); return *this; }
    LogRecord& str(const std::string& key, const std::string& value) { strs_.emplace_back(key, value); order_.push_back({false, strs_.size() - 1}); return *this; }
    std::string to_json() const;

private:
    std::string type_;
    std::vector<std::pair<std::string, double>> nums_;
    std::vector<std::pair<std::string, std::string>> strs_;
    std::vector<std::pair<bool, size_t>> order_;
};

class JsonlLog {
public:
    // Truncates (or, with append, continues a resumed run's log); fails naming the path.
    explicit JsonlLog(const std::string& path, bool append = false);
    ~JsonlLog();
    JsonlLog(const JsonlLog&) = delete;
    JsonlLog& operator=(const JsonlLog&) = delete;
    void write(const LogRecord& record);

private:
    std::string path_;
    FILE* file_ = nullptr;
};

}  // namespace train_gpt
