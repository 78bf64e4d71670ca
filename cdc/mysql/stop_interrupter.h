// StopInterrupter ends Connector/C calls that block (a connect, a query, a
// binlog read) once a StopSignal is raised. Connector/C cannot wait on a
// second descriptor as libpq's callers do, and StopSignal::Raise must stay
// async-signal-safe, so a thread of its own waits on the signal's fd and
// then interrupts what is registered (MysqlConnection::Interrupt,
// BinlogReader::Interrupt: a shutdown(2) of the socket), and at once
// anything registered later.
//
// Thread safety: Register and Unregister from any thread; the interrupt
// functions run on the interrupter's thread (or on the registering thread,
// when the signal was already raised), and must not call back into it. The
// StopSignal must outlive the interrupter; a registration must be removed
// before what it interrupts is destroyed (Scope does both).
#ifndef WALWATCH_CDC_MYSQL_STOP_INTERRUPTER_H_
#define WALWATCH_CDC_MYSQL_STOP_INTERRUPTER_H_

#include <cstdint>
#include <functional>
#include <map>
#include <thread>

#include "cdc/base/mutex.h"

namespace walwatch {
class StopSignal;
}

namespace walwatch::mysql {

class StopInterrupter {
 public:
  explicit StopInterrupter(const StopSignal* stop);
  ~StopInterrupter();
  StopInterrupter(const StopInterrupter&) = delete;
  StopInterrupter& operator=(const StopInterrupter&) = delete;

  // Registers `interrupt`; returns its id for Unregister. Runs it at once
  // if the signal was raised already.
  uint64_t Register(std::function<void()> interrupt);
  // Waits for an interrupt of this id that is running to end.
  void Unregister(uint64_t id);

  // Registered while alive.
  class Scope {
   public:
    Scope(StopInterrupter* interrupter, std::function<void()> interrupt)
        : interrupter_(interrupter),
          id_(interrupter->Register(std::move(interrupt))) {}
    ~Scope() { interrupter_->Unregister(id_); }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StopInterrupter* const interrupter_;
    const uint64_t id_;
  };

 private:
  void Loop();

  const StopSignal* const stop_;
  const int quit_fd_;  // an eventfd: ends the thread in the destructor
  // Held while an interrupt runs, so that Unregister returns only once it
  // is done with what it interrupts.
  Mutex mu_;
  std::map<uint64_t, std::function<void()>> interrupts_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  bool raised_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace walwatch::mysql

#endif  // WALWATCH_CDC_MYSQL_STOP_INTERRUPTER_H_
