package kstream_nb.reference;

import java.util.Map;

import org.apache.kafka.streams.state.RocksDBConfigSetter;
import org.rocksdb.InfoLogLevel;
import org.rocksdb.Options;

/**
 * Cheaper RocksDB instances for many short-lived drivers (each case opens and drops its stores): no info log files,
 * no statistics, no flush at close. Nothing here changes what a store holds or returns.
 */
public final class FastRocksDb implements RocksDBConfigSetter {
    @Override
    public void setConfig(final String storeName, final Options options, final Map<String, Object> configs) {
        options.setInfoLogLevel(InfoLogLevel.HEADER_LEVEL);
        options.setKeepLogFileNum(1);
        options.setAvoidFlushDuringShutdown(true);
        options.setStatsDumpPeriodSec(0);
        options.setStatsPersistPeriodSec(0);
        options.setSkipStatsUpdateOnDbOpen(true);
        options.setSkipCheckingSstFileSizesOnDbOpen(true);
        options.setMaxFileOpeningThreads(1);
        options.setAvoidUnnecessaryBlockingIO(true);
    }

    @Override
    public void close(final String storeName, final Options options) {
    }
}
